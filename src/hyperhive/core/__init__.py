"""The coordinator: the control plane and sole owner of hive.db and the meta repo."""
