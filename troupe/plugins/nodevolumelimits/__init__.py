"""NodeVolumeLimits' decisions (upstream
``pkg/scheduler/framework/plugins/nodevolumelimits``, ``csi.go``): unique CSI
volumes per driver on a node against the CSINode's ``allocatable.count``. ``limits``
is the per-node reference, ``counts`` the columnar path. No plugin is registered yet
(docs/volumes.md)."""
