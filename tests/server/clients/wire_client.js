// node-postgres as a client of the gateway's PostgreSQL listener: a parameterised query (the
// extended protocol) and a refusal. Usage: node wire_client.js PORT USER PASSWORD
const { Client } = require("pg");

async function main() {
  const [port, user, password] = process.argv.slice(2);
  const client = new Client({ host: "127.0.0.1", port: Number(port), user, password, database: "census" });
  client.on("notice", (notice) => console.log("notice " + notice.message));
  await client.connect();
  await client.query("SET dalenius.epsilon = 0.1");
  const result = await client.query(
    "SELECT sex, COUNT(*) AS n FROM people WHERE age > $1 GROUP BY sex", [30]);
  for (const row of result.rows) {
    console.log(`row ${row.sex} ${row.n} ${row.n_low} ${row.n_high}`);
  }
  try {
    await client.query("SELECT COUNT(*) FROM people WHERE agee > 3");
  } catch (error) {
    console.log(`refused ${error.code} ${error.position} ${error.hint}`);
  }
  await client.end();
}

main().catch((error) => { console.error(error); process.exit(1); });
