"""The admin's pages, one module each, registered here for Django's admin autodiscovery.

- `heldlocks`: Held locks, with a guarded terminate action.
- `runs`: Job runs, the run history.
- `jobs`: Jobs, with Pause / Resume / Run now.
- `schedules`: Schedules, the ones kept in the database.
- `calendars`: Calendar dates, the days operators add to business calendars.
- `timeline`: Timeline, every job's runs and coming ticks along one time axis
  (`timeline_svg` draws it).
- `common`: what several of them share.

Only the schedules and calendar dates are editable, with Django's model permissions; the
other pages are read-only.
"""

from django.contrib import admin

from ..models import CalendarDate, HeldLock, JobRun, RegisteredJob, Schedule, Timeline
from .calendars import CalendarDateAdmin
from .heldlocks import HeldLockAdmin
from .jobs import RegisteredJobAdmin
from .runs import JobRunAdmin
from .schedules import ScheduleAdmin
from .timeline import TimelineAdmin

admin.site.register(HeldLock, HeldLockAdmin)
admin.site.register(JobRun, JobRunAdmin)
admin.site.register(RegisteredJob, RegisteredJobAdmin)
admin.site.register(Schedule, ScheduleAdmin)
admin.site.register(Timeline, TimelineAdmin)
admin.site.register(CalendarDate, CalendarDateAdmin)
