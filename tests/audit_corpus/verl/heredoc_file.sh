#!/bin/bash
# A here-document written to a file, which the script then runs: the file is read, not run.
cat > /tmp/kl_patches_corpus_inner.sh <<'INNER'
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=True algorithm.kl_penalty=k1 \
    algorithm.norm_adv_by_std_in_grpo=False
INNER
bash /tmp/kl_patches_corpus_inner.sh
