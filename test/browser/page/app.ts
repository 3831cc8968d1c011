/**
 * The test page: OpenFeature's web SDK with the stock OFREP web provider, unmodified, polling
 * off (flag changes can only arrive through the change stream). The test reads `window.flags`.
 */
import { OFREPWebProvider } from "@openfeature/ofrep-web-provider";
import { OpenFeature, ProviderEvents } from "@openfeature/web-sdk";

const params = new URLSearchParams(location.search);
const state = { ready: false, error: "", changes: 0, value: (key: string, fallback: boolean) => client.getBooleanValue(key, fallback), details: (key: string) => client.getBooleanDetails(key, false) };
(window as unknown as { flags: typeof state }).flags = state;

const client = OpenFeature.getClient();
client.addHandler(ProviderEvents.ConfigurationChanged, () => state.changes++);
await OpenFeature.setContext({ targetingKey: "user-1", plan: "pro" });
try {
  await OpenFeature.setProviderAndWait(
    new OFREPWebProvider({
      baseUrl: params.get("base")!,
      headers: [["X-API-Key", params.get("key")!]],
      changeDetection: "sse",
      pollInterval: 0,
    }),
  );
  state.ready = true;
} catch (e) {
  state.error = String(e);
}
document.body.dataset.ready = String(state.ready);
