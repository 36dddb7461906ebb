"""XLA's HloVerifier rules, used by the ``hlo-verifier`` checker
(:class:`hlorun.verifier.checkers.HloVerifier`): ``shapes`` (declared vs inferred
shapes, per opcode), ``collectives``, ``async_ops``, ``instructions``
(structural rules per instruction) and ``module`` (module-level rules and
the driver)."""
