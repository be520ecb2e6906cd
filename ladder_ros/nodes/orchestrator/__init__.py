"""The orchestrator node: the LADDER loop on the graph (plan, attempt, verify, advance, retry, re-queue).

:class:`~ladder_ros.nodes.orchestrator.node.OrchestratorNode` runs one episode at a time and owns it: the episode's
id and clock origin (step stamps never run backwards across episodes), its plan and subgoal queue (the core
orchestrator), every step's decision, the verifier queries, the latched episode status and, once the episode is
over, its record (every event, the orchestration summary, the policy's report and, in simulation, the privileged
score). The node reads its parameters, owns the endpoints and converts messages; the episode is run by objects it
composes, each owning its own state behind a few public methods and tested without rclpy:

* ``episode.Episode`` -- the episode's state and latched status, shared by the objects below;
* ``control.EpisodeControl`` -- start, stop and abort commands, the start checks, and the plan from the VLM planner
  (``plan_source: planner``: asked with the first frame while that step waits; an unreadable, empty or late plan
  aborts the episode with the reason and the raw reply in its record);
* ``steps.StepDecider`` -- each step's inputs to the core's decision, its events and verifier queries (lockstep: a
  step that asked is decided once the answer is in, and the simulator waits; wall clock: the decision goes out at
  once and the answer is applied when it comes);
* ``ending.EpisodeEnder`` -- the final status and record once the score and the policy's final report are in, the
  last word on SIGINT/SIGTERM (record marked ``interrupted``), and the journal that lets a restarted orchestrator
  end an episode its killed predecessor left running;
* ``deadlines.Deadlines`` -- late plans, verifier answers (resent, the verifier reported unavailable with the queue
  kept, the episode aborted as ``verifier unavailable``), scores and decisions, and stalls;
* ``policy_gate.PolicyGate`` -- a start names a policy the policy node serves and waits for it to be ready (a name
  it does not serve, or a policy that cannot act, is refused with the reason); records get its report;
* ``resets.ResetEpisodes`` -- a start of kind ``reset`` (the scene of a task put back into its start regions after
  one of its episodes): the verifier's counts per moved kind and start region before anything moves, the reset
  plan (``ladder_ros/core/reset.py``), the reset run as an episode of its own, and the counts that confirm it
  once it is over (the record's ``reset``; an unconfirmed reset's status names what is out of place); a task whose
  scene has no start regions is refused in one line;
* ``stall_watch.StallWatch`` -- which input a stuck episode waits for (``waiting_for`` in the status), and when to
  give up; ``journal.EpisodeJournal`` -- the journal file; ``outbox.Outbox`` -- the publishers.

Topics (``ladder_ros/specs/topics.py``; relative to the graph namespace):

* subscribes ``episode/command`` (start, stop, abort), ``gripper/events`` (each step's attempt ends and releases),
  ``sim/privileged_state`` (the privileged verifier's goal predicates), ``verifier/result`` (count answers),
  ``planner/result`` (the plan), ``sim/episode_score`` (the score of a finished episode),
  ``safety/interventions`` (counts for the record), ``policy/status`` (ready or not; its episode report), and
  the stamps of ``joint_states`` and ``policy/action`` (only to name what a stalled step waits for);
* publishes ``orchestrator/decision`` (each step's final instruction; the lockstep token),
  ``orchestrator/current_subgoal`` (latched), ``orchestrator/events``, ``verifier/request``, ``planner/request``,
  ``episode/status`` (latched) and ``episode/command_reply`` (every command accepted or refused, with the reason);
* services ``episode/stop`` and ``episode/abort`` (std_srvs/Trigger).

Parameters (``ORCHESTRATOR`` in ``ladder_ros/specs/parameters.py``): ``preset`` (embodiment timing and budgets),
``clock_mode`` (lockstep or wall_clock), ``suite`` (task suite file), ``variant`` (when a start names none),
``preset_options`` (readings that differ from the preset), ``plan_source`` (reference or planner),
``planner_timeout_s``, ``verifier_retry_s``, ``verifier_abort_after_s``, ``decision_resend_s``, ``score_timeout_s``
(the deadlines, s), ``stall_warn_s`` and ``stall_abort_s`` (the stall watchdog, s), ``state_dir`` (the journal's
folder), ``policy_ready_wait_s`` (how long a start waits for the policy, s) and ``unavailable_policy`` (a start
naming a policy that cannot act: refuse, or wait for it).
"""
