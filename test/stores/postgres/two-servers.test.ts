import { randomBytes } from "node:crypto"
import pg from "pg"
import { PG_URL } from "../../fixtures/helpers.js"
import { twoServers } from "../../fixtures/two-servers.js"

twoServers("PostgresTaskStore", async () => {
  const table = `tn_two_${randomBytes(4).toString("hex")}`
  return {
    selector: `${PG_URL}?table=${table}`,
    cleanup: async () => {
      const admin = new pg.Client({ connectionString: PG_URL })
      await admin.connect()
      await admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_pushcfg, ${table}_outbox, ${table}_dead`)
      await admin.end()
    },
  }
})
