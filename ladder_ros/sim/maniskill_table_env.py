"""A ManiSkill3 env with several Bridge objects on SimplerEnv's flat table, for multi-subgoal tasks.

SimplerEnv-Long "keeps the original assets while adding" subgoals (LADDER paper, Section 3). This
env is therefore SimplerEnv's own ``BaseBridgeEnv`` (robot, tuned controller, camera, lighting,
table stage, green-screen overlay, asset loading through ``_build_actor_helper``, settling) with a
different list of objects: it subclasses it and registers itself with ManiSkill's ``register_env``,
so it is built by the same ``gym.make`` path as ``PutCarrotOnPlateInScene-v1``.

What differs from the two-object envs:

* Layouts: the items are placed on the cells of the carrot env's 2x2 grid, every ordered choice of
  distinct cells (24 layouts for 3 or 4 items); layout ``k`` also uses each item's
  ``yaws_deg[k % len]``. ``reset(options={"episode_id": k})`` selects layout ``k``.
* Success: ``evaluate`` reports nothing task-specific; per-subgoal predicates are computed by
  :mod:`ladder_ros.sim.maniskill_bridge` for every (object, container) pair with the same rule as
  ``BaseBridgeEnv._evaluate``.

Import this module only after :func:`ladder_ros.sim.maniskill_env.configure_current_process`:
importing ManiSkill fixes its asset folder.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from mani_skill.envs.tasks.digital_twins.bridge_dataset_eval.base_env import BaseBridgeEnv
from mani_skill.utils.registration import register_env
from transforms3d.euler import euler2quat

from ladder_ros.sim.maniskill_scenes import (
    GRID_CENTER_XY,
    GRID_HALF_EDGE_XY,
    MULTI_OBJECT_ENV_ID,
    grid_placements,
)

# A long horizon needs more than SimplerEnv's 60 steps; the backend steps the unwrapped env and
# enforces the task's own budget (100 steps per subgoal, LADDER paper Section 3), so this only
# bounds gym's TimeLimit wrapper for direct users.
_MAX_EPISODE_STEPS = 100 * 10


@register_env(MULTI_OBJECT_ENV_ID, max_episode_steps=_MAX_EPISODE_STEPS,
              asset_download_ids=["bridge_v2_real2sim"])
class BridgeTableMultiObjectEnv(BaseBridgeEnv):
    """Several Bridge models on the flat table, in one of ``layout_count`` grid layouts."""

    scene_setting = "flat_table"

    def __init__(self, model_ids: Sequence[str], spawn_z: Sequence[float], yaws_rad: Sequence[Sequence[float]],
                 grid_center_xy: Sequence[float] = GRID_CENTER_XY,
                 grid_half_edge_xy: Sequence[float] = GRID_HALF_EDGE_XY, **kwargs):
        if not (len(model_ids) == len(spawn_z) == len(yaws_rad)) or len(model_ids) < 2:
            raise ValueError("model_ids, spawn_z and yaws_rad need one entry per item, at least two items")
        # The 2x2 grid exactly as put_on_in_scene.py builds it: corners of a square around the centre.
        corners = np.array([[0, 0], [0, 1], [1, 0], [1, 1]]) * 2 - 1
        cells = corners * np.asarray(grid_half_edge_xy, dtype=np.float64)[None] + np.asarray(grid_center_xy)[None]
        placements = grid_placements(len(model_ids))
        xyz_configs = np.array([[[*cells[cell], spawn_z[i]] for i, cell in enumerate(placement)]
                                for placement in placements])
        quat_configs = np.array([[euler2quat(0.0, 0.0, yaws[k % len(yaws)]) for yaws in yaws_rad]
                                 for k in range(len(placements))])
        self.layout_count = len(placements)
        # Per instance: ManiSkill keeps these two as class attributes, shared by every env of the class.
        self.objects_excluded_from_greenscreening = list(model_ids)
        self._objects_to_remove_from_greenscreen = []
        super().__init__(obj_names=list(model_ids), xyz_configs=torch.tensor(xyz_configs),
                         quat_configs=torch.tensor(quat_configs), **kwargs)

    def _initialize_episode(self, env_idx: torch.Tensor, options: dict):
        # BaseBridgeEnv picks position set (id % (P*Q)) // Q and orientation set id % Q; here both
        # lists have one entry per layout, and layout k pairs position set k with orientation set k.
        options = dict(options)
        if "episode_id" in options:
            layout = torch.as_tensor(options["episode_id"]).reshape(-1) % self.layout_count
            options["episode_id"] = layout * self.layout_count + layout
        super()._initialize_episode(env_idx, options)

    def evaluate(self):
        # Per-subgoal predicates live in ladder_ros.sim.maniskill_bridge (one rule for every pair).
        return {}

    def get_language_instruction(self, **kwargs):
        return [""] * self.num_envs
