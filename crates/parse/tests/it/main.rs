//! Integration tests of toolshim-parse (one binary, see the house style).
