/** What both model APIs accept as a tool name, and so what the toolkit checks every tool's name against. */
export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/

/** The longest tool name. */
export const MAX_TOOL_NAME = 64
