"""What breaks: generated CLI cases, kill -9 campaigns, fuzzing, faulty clients, WMT-sized data."""
