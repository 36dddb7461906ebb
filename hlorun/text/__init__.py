"""HLO text in and out: the parser (Lark grammar in hlorun/grammars), the printer,
file reading/writing, canonical fingerprints."""
