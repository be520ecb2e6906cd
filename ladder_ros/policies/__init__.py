"""Low-level policies: configs (:mod:`.config`, one YAML per policy under ``policies/``), chunk sources (an
openpi server, :mod:`.openpi_remote`; a local transformers model, :mod:`.local_model`; the scripted expert,
simulation only), chunk execution (:mod:`.chunked` synchronous, :mod:`.executor` on the wall clock),
validation and conversion (:mod:`.actions`), and the factory the node and the evaluation tools share."""
