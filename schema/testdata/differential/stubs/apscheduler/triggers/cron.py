"""Stand-in for APScheduler's CronTrigger: checks the field count only."""


class CronTrigger:
    @classmethod
    def from_crontab(cls, expr, timezone=None):
        if len(expr.split()) != 5:
            raise ValueError("Wrong number of fields; got {}, expected 5".format(len(expr.split())))
        return cls()
