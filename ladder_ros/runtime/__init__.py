"""How a node process runs: its endpoints from the topic specs, its parameters declared from the specs, the
episode bookkeeping every node shares, its executor and shutdown, the parent-death guard, and the map of
executables to modules. No node logic lives here."""
