"""The fault campaign: safety by search. Seeded samples of (fault schedule x policy x goals) run in lock-step over
the real wire code against the simulated robot, each checked against the invariants (``invariants.py``).

    settings.py       the campaign's settings, the robot spec and loop config it runs with (time scaled)
    policies.py       adversarial policies and the shipped one
    policy_faults.py  faults of the policy callable (NaN, stall, wrong size, raise), on the controller side
    sample.py         one seed -> one sample (policy, goals, robot faults, policy faults)
    rig.py            one worker's robot and policy, reused across runs; runs one sample
    invariants.py     what every run must satisfy
    pool.py           worker processes with a per-run timeout (a hang is an outcome, not a stuck campaign)
    summary.py        faults x outcomes table, distinct failures, JSON + markdown
"""
