"""Process helpers shared by the driver, the actor shell and ``audition worker``: hygiene (actors die with
their parent, fatal signals end them), children (ended at exit, deaths heard), and the admin's watch of
the process that started its system. No engine logic here; the pure core never imports it."""
