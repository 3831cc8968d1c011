/**
 * A TCP forwarder on 127.0.0.1 between a client and the binary, that a test can cut: to drop a
 * connection the way a network does (nothing said, or a reset), which a client must survive.
 * TLS passes through it untouched.
 */
import { createServer, connect, type Server, type Socket } from "node:net";

export interface TcpProxy {
  port: number;
  /** Connections forwarded so far. */
  connections(): number;
  /** Resets every open connection and refuses new ones (accepted, then reset at once). */
  cut(): void;
  /** Open connections stay open but carry nothing, either way; new ones are forwarded. */
  blackhole(): void;
  /** Forwards new connections again (after cut). */
  restore(): void;
  close(): Promise<void>;
}

export async function tcpProxy(targetPort: number): Promise<TcpProxy> {
  let refusing = false;
  let count = 0;
  const pairs = new Set<[Socket, Socket]>();
  /** Blackholed pairs: open until the proxy closes. */
  const held = new Set<[Socket, Socket]>();
  const server: Server = createServer((client) => {
    if (refusing) {
      client.resetAndDestroy();
      return;
    }
    count++;
    const upstream = connect({ host: "127.0.0.1", port: targetPort });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    connections: () => count,
    cut() {
      refusing = true;
      for (const [client, upstream] of pairs) {
        client.resetAndDestroy();
        upstream.destroy();
      }
      pairs.clear();
    },
    blackhole() {
      for (const pair of pairs) {
        const [client, upstream] = pair;
        client.unpipe(upstream);
        upstream.unpipe(client);
        // Read and drop: a paused socket would push back on the sender instead of going quiet.
        client.on("data", () => {});
        upstream.on("data", () => {});
        held.add(pair);
      }
      pairs.clear();
    },
    restore() {
      refusing = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const [client, upstream] of [...pairs, ...held]) {
          client.destroy();
          upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
