"""neighbours"""
