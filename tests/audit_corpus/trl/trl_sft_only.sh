#!/bin/bash
# Only supervised fine-tuning is launched here.
trl sft --model_name_or_path Qwen/Qwen2.5-0.5B --dataset_name trl-lib/Capybara
