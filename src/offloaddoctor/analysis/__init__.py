"""Numbers from logs and the matching engine that turns lines into findings."""
