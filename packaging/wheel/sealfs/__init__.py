"""sealfs as a Python wheel: the daemon and sealfs-mountctl, with the shared
libraries they need vendored (auditwheel). See sealfs(8) and README.md."""

__version__ = "@SEALFS_VERSION@"
