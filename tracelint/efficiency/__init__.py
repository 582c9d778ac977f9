"""Kernel efficiency without counters: device peaks, work models from op shapes, roofline, MFU.

Every number here is an estimate (a model of the work over a datasheet peak); callers mark it
`estimated`, never `measured`.
"""
