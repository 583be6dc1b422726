"""One pod's way through the scheduler: the scheduling cycle and the binding cycle.

- ``algorithm``: where a pod goes (PreFilter to Score, sampling, selection,
  PostFilter), shared by pods and gang members;
- ``pod_cycle``: a popped pod's scheduling cycle (assume, Reserve, Permit);
- ``pod_batch`` / ``batch_placer``: pods and members of one signature placed from
  one shared evaluation (KEP-5598);
- ``binding_cycle``: WaitOnPermit, PreBind, Bind, PostBind in owned tasks;
- ``failure`` / ``writer``: what the user is told, written in the background;
- ``evictions``: carrying out what preemption decided.

The loop (``troupe.scheduler.loop``) builds these once; the group cycle
(``troupe.scheduler.gangs``) places and binds its members through them.
"""
