#!/bin/bash
# Only OpenRLHF's supervised fine-tuning runs here.
deepspeed --module openrlhf.cli.train_sft --pretrain m --dataset d
