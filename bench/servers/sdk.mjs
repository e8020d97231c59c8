// Server C: the official @a2a-js/sdk 1.3 on Express, its InMemoryTaskStore, an executor that answers at once.
import { serveSdk } from "./sdk-app.mjs"
import { EchoExecutor } from "./sdk-echo.mjs"

await serveSdk(new EchoExecutor(), "echo agent for the benchmark")
