"""VolumeRestrictions' decisions (upstream
``pkg/scheduler/framework/plugins/volumerestrictions``): in-tree disk conflicts
(``disks``) and ReadWriteOncePod claims in use (``rwop``). No plugin is registered
yet (docs/volumes.md)."""
