/**
 * One of bench:streams' client processes (streams.ts starts a few: one process holding a
 * thousand TLS connections would measure itself): opens `--count` OFREP change streams to
 * `--url` and prints, as lines on stdout,
 *   `ready N`            once every stream got its first line (`retry: 1000`);
 *   `m ID TIME`          for every message received, TIME its arrival (ms, wall clock with
 *                        sub-millisecond resolution, comparable across processes);
 *   `ended N`            when a stream ended (the server closed it).
 * It runs until it is killed.
 * Usage: bun scripts/bench/streams-client.ts --url https://127.0.0.1:PORT/ofrep/v1/events?token=... --count 250
 */
import { argOf } from "../lib/proc";
import { eventId, readEvents } from "../lib/streams";

const url = argOf("--url")!;
const count = Number(argOf("--count") ?? 250);
const now = () => performance.timeOrigin + performance.now();

let out = "";
let flushing = false;
/** Lines are written in batches: a message reaches hundreds of streams at once. */
function print(line: string): void {
  out += `${line}\n`;
  if (flushing) return;
  flushing = true;
  setTimeout(() => {
    process.stdout.write(out);
    out = "";
    flushing = false;
  }, 5);
}

let ready = 0;
let ended = 0;
async function open(): Promise<void> {
  const res = await fetch(url, { tls: { rejectUnauthorized: false } });
  if (res.status !== 200) throw new Error(`stream refused: ${res.status} ${await res.text()}`);
  await readEvents(res.body!, (block) => {
    if (block.startsWith("retry:")) {
      if (++ready === count) print(`ready ${count}`);
    } else if (block.includes("event: message")) print(`m ${eventId(block)} ${now().toFixed(3)}`);
  });
  print(`ended ${++ended}`);
}

const BATCH = 25;
const until = (n: number) => new Promise<void>((done) => {
  const check = () => (ready >= n ? done() : setTimeout(check, 2));
  check();
});
const fail = (e: unknown) => {
  console.error(String(e));
  process.exit(1);
};
// Connected BATCH at a time: a thousand TLS handshakes at once would measure the handshakes.
for (let i = 0; i < count; i += BATCH) {
  const n = Math.min(BATCH, count - i);
  for (let j = 0; j < n; j++) void open().catch(fail);
  await until(i + n);
}
await new Promise(() => {}); // until killed
