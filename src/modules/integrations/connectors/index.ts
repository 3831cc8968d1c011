/** Every integration type (decisions §12), by its identifier. */
import { braze } from "./braze";
import { datadog } from "./datadog";
import { slack } from "./slack";
import type { Connector } from "./types";

export const CONNECTORS: Readonly<Record<string, Connector>> = Object.freeze({
  braze: braze as Connector,
  datadog: datadog as Connector,
  slack: slack as Connector,
});
