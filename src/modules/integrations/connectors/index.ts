/** Every integration type (decisions §12), by its identifier. */
import { amplitude } from "./amplitude";
import { braze } from "./braze";
import { datadog } from "./datadog";
import { mixpanel } from "./mixpanel";
import { segment } from "./segment";
import { slack } from "./slack";
import type { Connector } from "./types";

export const CONNECTORS: Readonly<Record<string, Connector>> = Object.freeze({
  mixpanel: mixpanel as Connector,
  amplitude: amplitude as Connector,
  segment: segment as Connector,
  braze: braze as Connector,
  datadog: datadog as Connector,
  slack: slack as Connector,
});
