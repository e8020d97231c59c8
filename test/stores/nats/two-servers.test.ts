import { randomBytes } from "node:crypto"
import { connect } from "nats"
import { NATS_URL } from "../../fixtures/helpers.js"
import { twoServers } from "../../fixtures/two-servers.js"

twoServers("NatsTaskStore", async () => {
  const bucket = `tn_two_${randomBytes(4).toString("hex")}`
  return {
    selector: `${NATS_URL}?bucket=${bucket}`,
    cleanup: async () => {
      const nc = await connect({ servers: NATS_URL })
      const jsm = await nc.jetstreamManager()
      await jsm.streams.delete(`KV_${bucket}`).catch(() => false)
      await nc.close()
    },
  }
})
