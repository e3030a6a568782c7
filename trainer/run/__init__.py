"""What a run leaves and shows: checkpoints, the Hugging Face export, metrics, plots, progress lines, the
jobs API's train entry."""
