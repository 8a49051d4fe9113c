// node-redis as an application uses it: sendCommand for our commands, a MULTI transaction,
// info(), on RESP2 and RESP3.  Prints one JSON line per step; clients.py checks them.
// Usage: node node_client.mjs PORT RESP (2 or 3), with `redis` installed next to it.  Each run
// uses keys of its own (suffixed with RESP), so its answers do not depend on the time between runs.
import { createClient } from "redis";

const [port, resp] = [Number(process.argv[2]), Number(process.argv[3])];
const client = createClient({ url: `redis://127.0.0.1:${port}`, RESP: resp });
client.on("error", (e) => { console.error("client error", e.message); process.exit(1); });
await client.connect();
const out = (step, value) => console.log(JSON.stringify({ step, value }));
out("ping", await client.ping());
out("throttle", await client.sendCommand(["CL.THROTTLE", `user:42:${resp}`, "15", "30", "60", "1"]));
out("check", await client.sendCommand(["RL.CHECK", `node:${resp}`, "fixed_window:2/1h"]));
const tx = await client.multi()
  .addCommand(["RL.CHECK", `node:${resp}`, "fixed_window:2/1h"])
  .addCommand(["RL.CHECK", `node:${resp}`, "fixed_window:2/1h"])
  .exec();
out("multi", tx);
const info = await client.info("clients");
out("info", info.includes("connected_clients:"));
await client.quit();
