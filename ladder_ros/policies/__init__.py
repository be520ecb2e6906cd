"""Low-level policies behind one interface: the scripted expert (simulation only) and real models."""
