"""audits"""
