"""The robot drivers: the WidowX's (Interbotix API) and the Franka's (franky), on one safety base."""
