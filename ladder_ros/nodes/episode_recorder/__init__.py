"""The episode recorder node: every topic of an episode into one rosbag2 MCAP bag.

:class:`~ladder_ros.nodes.episode_recorder.node.EpisodeRecorderNode` owns the recordings: one bag per episode in
``<output_dir>/<episode_id>/`` (``<episode_id>.partN/`` when a recorder restarted mid-episode), opened when the
episode status announces a new episode, closed after its final status (or once its operator labels are final),
flushed every second so a killed recorder loses at most the last second, and closed with a record marked
``interrupted`` when the episode cannot end by its rules (the orchestrator left the graph, or the recorder was
stopped first). Messages arriving just before an episode's status are kept for its bag. The node owns the
subscriptions, the open bag and its custom data; it composes:

* ``graph_state.GraphStateMessages`` -- the distinct messages of latched topics that describe the graph
  (``/tf_static``), written into every bag when it opens;
* ``qos.OfferedQos`` -- the QoS each topic's publishers offer, looked up once and written into the bag's
  ``metadata.yaml`` so a bag replays each topic as it was published.

Topics (``ladder_ros/specs/topics.py``; relative to the graph namespace): subscribes to every topic of
``TOPICS`` in raw mode with its publishers' QoS and a deeper queue (``/clock``, ``/diagnostics`` and
``/tf_static`` included; it reads ``episode/status``, ``episode/command`` and ``operator/labels`` itself to open
and close bags, and ``orchestrator/events`` for the record of an interrupted episode); publishes ``/diagnostics``
(1 Hz: the open episode, and the topics whose publishers it has not matched yet). No services.

Parameters (``EPISODE_RECORDER`` in ``ladder_ros/specs/parameters.py``): ``preset`` and ``clock_mode`` (as every
node), ``output_dir`` (the recordings' folder), ``graph`` (the graph description's name, stored in each bag),
``config_files`` (files stored verbatim in each bag), ``close_grace_s`` (how long a bag stays open after the final
status, s) and ``labels_grace_s`` (how long it waits for an operator's final labels, s).
"""
