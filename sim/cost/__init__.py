"""Cost models: one small module per engine or link, each turning work into seconds."""
