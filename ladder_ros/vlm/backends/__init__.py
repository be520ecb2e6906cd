"""VLM backends behind one interface (:mod:`.base`); each module imports its heavy dependency lazily."""
