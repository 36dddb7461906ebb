"""Test support that ships with hlorun: a FileCheck-compatible matcher
(:mod:`hlorun.testing.filecheck`) and the pass-test harness that runs our
fixture files and XLA's own pass tests (:mod:`hlorun.testing.passcases`)."""
