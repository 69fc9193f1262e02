-- The MCP gateway (issue 41): a read tool's policy may let the gateway forward its calls
-- while Flightdeck cannot be reached. Every other call fails closed.
ALTER TABLE tool_policies ADD COLUMN fail_open BOOLEAN NOT NULL DEFAULT FALSE;
