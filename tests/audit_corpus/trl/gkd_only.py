"""GKD: its beta mixes a divergence to a teacher; not a KL to a reference policy."""

from trl import GKDConfig, GKDTrainer

GKDTrainer(model="student", teacher_model="teacher", args=GKDConfig(output_dir="o", beta=0.5))
