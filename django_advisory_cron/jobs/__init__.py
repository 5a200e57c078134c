"""What a job is and where jobs come from: Job, @locked_task, schedules as data, the catalog."""
