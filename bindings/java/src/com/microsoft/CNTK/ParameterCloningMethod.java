package com.microsoft.CNTK;

/**
 * How a clone gets the parameters. Loom evaluates without changing parameters, so the three
 * give the same results; each clone shares the one copy of the parameters.
 */
public enum ParameterCloningMethod {
  Share,
  Clone,
  Freeze
}
