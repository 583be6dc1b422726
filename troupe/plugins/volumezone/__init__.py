"""VolumeZone's decisions (upstream ``pkg/scheduler/framework/plugins/volumezone``):
bound PVs' zone and region labels against the nodes'. See ``zones``. No plugin is
registered yet (docs/volumes.md)."""
