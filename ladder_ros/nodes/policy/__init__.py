"""The policy node: turns observations into ``policy/action`` with the low-level policy each episode names.

:class:`~ladder_ros.nodes.policy.node.PolicyNode` owns the low-level policies of the graph: one, or several by name
to compare checkpoints in one graph, each with its config and provider (the model loaded once, or the server's
client) and its warm-up before its first episode; the current episode's policy (the one its status names, chosen
at its start) and the actions it publishes, converted from the policy's own convention to the graph's contract.
The node reads its parameters, owns the endpoints and the current episode, and converts messages; the rest is
done by objects it composes, each owning its own state behind a few public methods:

* ``roster.PolicyRoster`` -- the named policies (``NamedPolicy``: provider, config, warm-up), the default and the
  one in use; ``roster.ActiveWarmUp`` is the warm-up of the one in use;
* ``lockstep.LockstepActor`` -- simulation: one action per step once the step's observation and decision are in,
  with the same synchronous chunked policy the reference loop runs; a failed call is retried while the simulator
  waits;
* on the wall clock, a ``ChunkExecutor`` per policy (``ladder_ros/policies/executor.py``: inference thread,
  chunks) driven by a ``ControlLoop`` thread on absolute deadlines, fed by ``inputs.LatestInputs`` (the newest
  message of each input and when it was observed);
* ``status.PolicyStatusPublisher`` -- ``policy/status``: each policy warming up, ready, failing or unavailable, and
  the episode's report; ``reporting.EpisodeReporter`` -- that report, and ending an episode whose server keeps
  failing;
* ``diagnostics.PolicyDiagnostics`` -- ``/diagnostics``: acting or holding and why, latency, chunk counts.

Topics (``ladder_ros/specs/topics.py``; relative to the graph namespace):

* subscribes ``joint_states``, ``ee_pose``, each camera topic of the policy configs (``camera/image_raw`` by
  default), ``sim/privileged_state`` (lockstep: the simulator's exact pose; object poses for the scripted
  expert only), ``orchestrator/decision`` (each step's instruction; the lockstep token), ``episode/status`` and,
  with ``warm_up`` on_first_use, ``episode/command`` (a start that names a policy not warmed up yet);
* publishes ``policy/action`` (trajectory_msgs/JointTrajectory), ``policy/action_tag`` (each action's policy,
  chunk, observation stamp and latency), ``policy/status`` (latched), ``/diagnostics`` (1 Hz) and, to end an episode it
  cannot act in, ``episode/command`` (abort);
* no services.

Parameters (``POLICY`` in ``ladder_ros/specs/parameters.py``): ``preset`` (embodiment and control rate),
``clock_mode`` (lockstep or wall_clock), ``policy`` (config name or path), ``policies`` (several, as NAME=CONFIG),
``default_policy`` (when a start names none), ``warm_up`` (at_start or on_first_use), ``noise`` (scripted expert
noise), ``rotation_convention`` (replaces the policy's own), ``execution`` (wall clock: realtime or synchronous
chunks), ``aperture_joint`` (the gripper's joint state entry), ``control_priority`` (SCHED_FIFO priority of the
control thread), ``max_observation_age_s`` (wall clock: hold still on older observations, s) and
``warm_up_timeout_s`` (the warm-up's deadline, s).
"""
