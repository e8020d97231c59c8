// The part of Express 5's API the bench's SDK servers use (the package ships no types, and @types/express is not a
// dependency); the SDK's Express handlers are typed against this RequestHandler.
declare module "express" {
  import type { IncomingMessage, Server, ServerResponse } from "node:http"
  export type RequestHandler = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void
  export interface Express extends RequestHandler {
    use(handler: RequestHandler): Express
    use(path: string, handler: RequestHandler): Express
    /** The callback gets an error when the server could not listen (Express 5). */
    listen(port: number, host: string, callback: (err?: Error) => void): Server
  }
  function express(): Express
  export default express
}
