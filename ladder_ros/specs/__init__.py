"""The graph's contract in data: every topic and service (name, type, QoS, rate; :mod:`.topics`) and every
node's parameters (name, type, default, range, description; :mod:`.param_spec`, :mod:`.parameters`,
:mod:`.robot_parameters`), with the rules that check them before a graph starts."""
