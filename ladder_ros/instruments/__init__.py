"""What stands in for the world in simulation and rehearsal: the WidowX twin (a model of Interbotix's API and
its motors), franky-sim's node, the fake and twin cameras, the scripted expert, the rehearsal's openpi-protocol
server and the fake openpi server, with their nodes and parameter specs.

The product never imports this package: it names an instrument (``ladder_ros.instrument_registry``,
``ladder_ros.runtime.executables``) and bringup, evaluation, benchmarks and tests load it."""
