package com.microsoft.CNTK;

/** CNTK's SizeTVectorVector (std::vector<std::vector<size_t>>): sequences of data. */
public class SizeTVectorVector extends ObjectVector<SizeTVector> {}
