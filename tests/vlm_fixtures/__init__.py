"""Test doubles and builders for the VLM tests: a fake Gemini server, tiny local VLMs, a scripted
backend and a benchmark dataset writer. Nothing here reaches a network beyond 127.0.0.1 or a hub."""

import os

# No hub access, ever: set before any test module imports transformers, datasets or huggingface_hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
