"""The scheduling loop: ``Scheduler`` builds the cycles and runs ``schedule_one``.

Only this package and ``troupe.scheduler.service`` know the ``Scheduler`` class.
"""
